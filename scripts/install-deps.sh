#!/usr/bin/env bash
# install-deps.sh: installs the Debian packages d9 needs to build, test and benchmark.
# Idempotent: asks dpkg first and only calls apt-get for what is missing, so a second run
# costs a fraction of a second. Needs root (or sudo) only when something is missing.
set -euo pipefail

pkgs=(
	build-essential pkg-config clang libclang-rt-14-dev   # toolchain, libFuzzer + sanitizers
	zlib1g-dev libdeflate-dev libdw-dev libelf-dev libcurl4-openssl-dev
	libprotobuf-c-dev protobuf-c-compiler                  # `d9-analyze pprof` (analyze/proto/)
	golang-go                                             # go tool pprof: test-pprof.sh reads the profiles
	libiberty-dev                                         # C++ demangler (static, linked in)
	libst-dev                                             # State Threads, the first runtime
	libcapstone-dev                                       # decodes prologues to patch (preload/patch.c)
	libuv1-dev                                            # libuv (preload/rt-libuv.c, tests/servers/uv-http.c)
	wrk curl valgrind python3 python3-botocore            # test load, tests' helpers
	knot-resolver bind9 dnsperf                           # real DNS servers + load (test-stacks.sh)
	redis-server                                          # a real epoll server (test-real-redis.sh, make bench)
	nginx memcached                                       # real servers: privilege drops, names (test-real-*.sh)
	haproxy                                               # a real server whose workers chroot (test-real-haproxy.sh)
	dnsmasq-base                                          # a real server that drops CAP_CHOWN before its setuid (test-real-dnsmasq.sh)
	openssh-client libwrap0 libgssapi-krb5-2 libkrb5-3    # test-real-sshd.sh: the client, the unpacked sshd's libraries
	libedit2 libgnutls30 libnettle8 libseccomp2           # test-real-chrony.sh: the unpacked chronyd's libraries
	strace                                                # make bench: syscalls per request
	libmemcached-tools                                    # make bench: memcaslap (bench-real.sh)
	chromium                                              # viewer tests (tests/browser)
)
command -v npm >/dev/null || pkgs+=(npm)                      # Debian's npm brings nodejs

missing=()
for p in "${pkgs[@]}"; do
	s=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$s" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#pkgs[@]} packages present"
else
	echo "install-deps: installing ${missing[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Servers tested but not installed (installing them would start a login server or a time
# daemon on this machine): their packages are downloaded and unpacked into build/debs/<name>/,
# for test-real-sshd.sh and test-real-chrony.sh, which skip (counted) without them. sshd also needs
# its privilege-separation user, as Debian's openssh-server package makes it.
root_dir="$(cd "$(dirname "$0")/.." && pwd)"
debs_dir="$root_dir/build/debs"
for p in openssh-server chrony; do
	[ -d "$debs_dir/$p/usr/sbin" ] && continue
	mkdir -p "$debs_dir/$p.dl"
	if ! (cd "$debs_dir/$p.dl" && apt-get download -qq "$p" >/dev/null 2>&1) &&
		! { [ "$(id -u)" -eq 0 ] && apt-get update -qq &&
			(cd "$debs_dir/$p.dl" && apt-get download -qq "$p" >/dev/null 2>&1); }; then
		echo "install-deps: cannot download $p: test-real-${p%%-*}.sh will be skipped" >&2
		rm -rf "$debs_dir/$p.dl"
		continue
	fi
	dpkg-deb -x "$debs_dir/$p.dl"/"$p"_*.deb "$debs_dir/$p" && rm -rf "$debs_dir/$p.dl"
	echo "install-deps: $p unpacked into build/debs/$p (not installed)"
done
if [ "$(id -u)" -eq 0 ] && ! getent passwd sshd >/dev/null; then
	useradd --system --no-create-home --home-dir /run/sshd --shell /usr/sbin/nologin sshd &&
		echo "install-deps: made the system user sshd (sshd's privilege separation)"
fi

# playwright-core (drives the chromium above; no browser download) for the viewer tests, pinned
# by tests/browser/package-lock.json into tests/browser/node_modules; skipped when present.
browser_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
if [ ! -f "$browser_dir/node_modules/playwright-core/package.json" ]; then
	echo "install-deps: npm ci in tests/browser"
	(cd "$browser_dir" && npm ci --no-audit --no-fund --loglevel=error) ||
		echo "install-deps: npm ci failed: the viewer's browser tests will fail" >&2
fi
# s3rver (the S3 peer of test-s3.sh), pinned by tests/s3/package-lock.json; skipped when present
s3_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/s3"
if [ ! -f "$s3_dir/node_modules/s3rver/package.json" ]; then
	echo "install-deps: npm ci in tests/s3"
	(cd "$s3_dir" && npm ci --no-audit --no-fund --loglevel=error) ||
		echo "install-deps: npm ci failed: test-s3.sh will be skipped" >&2
fi

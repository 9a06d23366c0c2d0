# A throwaway local npm registry for the install-route tests (sourced by npm-route.sh and
# plugin-route.sh): verdaccio, pinned, installed once into target/dist-cache from the npm registry
# this user has configured, listening on 127.0.0.1 with no uplinks, so installs from it cannot
# reach the internet.
#
#   registry_session NAME DIST   the scripts' common start: checks DIST (contrib/release.py's
#                                output), sets $repo $dist $version $tmp (removed on exit unless
#                                DIST_KEEP=1), defines fail/step, starts the registry
#                                ($registry_url) and publishes DIST's packages to it

# 6.8: the newest that runs on Node 20 (6.9 needs 22).
VERDACCIO=6.8.0
registry_pid=
registry_url=

registry_stop() {
    if [ -n "$registry_pid" ]; then
        kill "$registry_pid" 2>/dev/null || true
        wait "$registry_pid" 2>/dev/null || true
        registry_pid=
    fi
    return 0
}

registry_start() {
    local tmp=$1 repo cache port
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    # The override: verdaccio-audit asks for node-fetch's `cjs` dist-tag, which registry mirrors
    # may lack; 2.7.0 is the release that tag names.
    cache=$repo/target/dist-cache/verdaccio-$VERDACCIO
    if [ ! -x "$cache/node_modules/.bin/verdaccio" ]; then
        step "installing verdaccio $VERDACCIO into $cache (once)"
        mkdir -p "$cache"
        printf '{"private":true,"dependencies":{"verdaccio":"%s"},"overrides":{"verdaccio-audit":{"node-fetch":"2.7.0"}}}\n' \
            "$VERDACCIO" >"$cache/package.json"
        # node-gyp's headers and any install script's cache stay in target/, not ~/.cache.
        (cd "$cache" && XDG_CACHE_HOME=$cache/.cache npm_config_devdir=$cache/.cache/node-gyp \
            timeout 600 npm install --no-audit --no-fund --loglevel=error) ||
            fail "npm install verdaccio@$VERDACCIO failed"
    fi

    port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
    registry_url=http://127.0.0.1:$port/
    # Publishing needs a user (npm sends a token); the htpasswd file is throwaway.
    cat >"$tmp/verdaccio.yaml" <<EOF
storage: $tmp/storage
auth:
  htpasswd:
    file: $tmp/htpasswd
    max_users: 1
packages:
  '**':
    access: \$all
    publish: \$authenticated
log: { type: file, path: $tmp/verdaccio.log, level: warn }
# CI packages debug builds (about 100 MB each); verdaccio's default limit is 10 MB.
max_body_size: 1gb
EOF
    step "starting verdaccio $VERDACCIO on $registry_url"
    "$cache/node_modules/.bin/verdaccio" --config "$tmp/verdaccio.yaml" --listen "127.0.0.1:$port" \
        >"$tmp/verdaccio.out" 2>&1 &
    registry_pid=$!
    local _
    for _ in $(seq 150); do
        curl -fsS "${registry_url}-/ping" >/dev/null 2>&1 && break
        kill -0 "$registry_pid" 2>/dev/null || fail "verdaccio exited: $(cat "$tmp/verdaccio.out")"
        sleep 0.2
    done
    curl -fsS "${registry_url}-/ping" >/dev/null || fail "verdaccio did not answer within 30 s"
    local token
    token=$(curl -fsS -X PUT -H 'content-type: application/json' \
        -d '{"name":"release","password":"release-pw"}' "${registry_url}-/user/org.couchdb.user:release" |
        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).token||""))')
    [ -n "$token" ] || fail "could not create the registry user"
    registry_npmrc=$tmp/publisher.npmrc
    printf 'registry=%s\n//127.0.0.1:%s/:_authToken=%s\n' "$registry_url" "$port" "$token" >"$registry_npmrc"
    registry_tmp=$tmp
}

registry_publish() {
    local dist=$1 version=$2 pkg
    [ -f "$dist/loopgate-$version.tgz" ] || fail "$dist/loopgate-$version.tgz missing: run contrib/release.py first"
    for pkg in "$dist"/loopgate-cli-*-"$version".tgz "$dist/loopgate-$version.tgz"; do
        [ -f "$pkg" ] || fail "no platform packages of $version in $dist"
        step "publishing $(basename "$pkg")"
        timeout 120 env npm_config_userconfig="$registry_npmrc" npm_config_cache="$registry_tmp/npm-cache-publish" \
            npm publish --loglevel=error "$pkg" >/dev/null || fail "npm publish $(basename "$pkg") failed"
    done
}

registry_session() {
    script_name=$1
    shift
    [ $# -eq 1 ] || { echo "usage: $script_name DIST (the directory contrib/release.py wrote)" >&2; exit 2; }
    fail() {
        printf '%s: FAIL: %s\n' "$script_name" "$*" >&2
        exit 1
    }
    step() { printf '%s: %s\n' "$script_name" "$*"; }
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    dist=$(cd "$1" && pwd) || fail "no directory $1"
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -1)
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/loopgate-$script_name.XXXXXX")
    trap 'registry_stop; if [ "${DIST_KEEP:-}" = 1 ]; then echo "$script_name: kept $tmp" >&2; else rm -rf "$tmp"; fi' EXIT
    registry_start "$tmp"
    registry_publish "$dist" "$version"
}

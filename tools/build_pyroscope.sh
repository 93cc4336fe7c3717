#!/bin/sh
# Builds a Grafana Pyroscope server (v1.8.0, from the Go module proxy) for the fleet tests and
# prints the binary's path.  The binary is cached outside the repository, in
# ${LEADLINE_CACHE:-$HOME/.cache/leadline}/pyroscope-1.8.0/pyroscope; a cold build takes about
# nine minutes on two cores, a cached one nothing.  Nothing of it is committed.
set -eu
VERSION=v1.8.0
CACHE=${LEADLINE_CACHE:-$HOME/.cache/leadline}
OUT=$CACHE/pyroscope-${VERSION#v}
BIN=$OUT/pyroscope
if [ -x "$BIN" ]; then
    echo "$BIN"
    exit 0
fi
command -v go >/dev/null 2>&1 || { echo "build_pyroscope: Go is needed to build the Pyroscope server" >&2; exit 1; }
mkdir -p "$OUT"
WORK=$(mktemp -d "$OUT/build.XXXXXX")
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
DIR=$(GOFLAGS=-mod=mod go mod download -json "github.com/grafana/pyroscope@$VERSION" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$DIR" ] && [ -d "$DIR" ] || { echo "build_pyroscope: could not download github.com/grafana/pyroscope@$VERSION" >&2; exit 1; }
cp -R "$DIR/." "$WORK/src"
chmod -R u+w "$WORK/src"
cd "$WORK/src"
rm -f go.work go.work.sum
go mod edit -dropreplace=github.com/grafana/pyroscope/api -require=github.com/grafana/pyroscope/api@v1.0.0
echo "build_pyroscope: building the Pyroscope server $VERSION (a cold build takes minutes)" >&2
GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GONOSUMDB=github.com/grafana/pyroscope/api \
    go build -p "$(nproc)" -o "$WORK/pyroscope" ./cmd/pyroscope
mv "$WORK/pyroscope" "$BIN"
echo "$BIN"

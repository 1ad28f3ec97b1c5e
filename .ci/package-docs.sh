#!/bin/sh
# Package-doc lint (make lint): every package's doc comment says what it
# owns and what it never does (DEVELOPERS.md, "How we write Go here"), so
# each must exist and contain "never".
set -eu
status=0
for dir in $(go list -f '{{.Dir}}' ./...); do
	doc=$(for f in "$dir"/*.go; do
		case "$f" in *_test.go) continue ;; esac
		awk '/^\/\/ (Package|Command) /{on=1} on && /^\/\//{print} on && !/^\/\//{exit}' "$f"
	done)
	rel=${dir#"$(pwd)"/}
	if [ -z "$doc" ]; then
		echo "$rel: no package doc comment (// Package $(basename "$dir") … owns …, never …)"
		status=1
	elif ! printf '%s' "$doc" | grep -q 'never'; then
		echo "$rel: the package doc does not say what the package never does"
		status=1
	fi
done
exit $status

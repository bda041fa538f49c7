#!/usr/bin/env bash
# tests/cli/harness/bench_help.sh - every cortex-bench subcommand answers -h and
# --help with its own usage on stdout (exit 0), and an unknown flag, or a
# flag missing its value, is one error line naming it (exit 2). The
# subcommands are read from the command table (harness/commands.c), so a new
# one is walked too; every flag the parser takes for a subcommand (the flag
# table's entries carrying its bit, in harness/commands.c) and every flag its
# own file names (a "-x"/"--xyz" literal in the file defining cmd_NAME, e.g.
# in a message) must appear in its usage, and every flag the usage lists is
# one the parser takes.
set -u
. "$(dirname "$0")/../lib/common.sh"
BENCH=$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")
src=$PWD/harness
cd "$tmp" # nothing below may touch a real database or write into the tree

cmds=$(grep -oE '^    \{"[a-z]+", cmd_[a-z]+,' "$src/commands.c" | sed -E 's/^ *\{"([a-z]+)".*/\1/')
check "the command table lists at least 13 subcommands" test "$(echo "$cmds" | wc -w)" -ge 13
"$BENCH" --help >top.out 2>top.err
check "cortex-bench --help exits 0" test $? -eq 0
"$BENCH" >/dev/null 2>&1
check "cortex-bench without a command exits 2" test $? -eq 2
"$BENCH" frobnicate >nocmd.out 2>nocmd.err
check "an unknown command exits 2 with one line naming it" \
    test $? -eq 2 -a "$(wc -l <nocmd.err)" -eq 1 -a ! -s nocmd.out
check "... which names it" grep -q "'frobnicate'" nocmd.err

for c in $cmds; do
    check "$c: listed by cortex-bench --help" grep -qE "^  $c( |$)" top.out
    for h in --help -h; do
        "$BENCH" "$c" "$h" >"$c$h.out" 2>"$c$h.err"
        check "$c $h: exits 0, nothing on stderr" test $? -eq 0 -a ! -s "$c$h.err"
        check "$c $h: usage of $c on stdout" grep -q "^usage: cortex-bench $c" "$c$h.out"
        check "$c $h: an example" grep -qA1 "^example:" "$c$h.out"
    done
    check "$c: -h and --help print the same" cmp -s "$c--help.out" "$c-h.out"
    # Every flag of the table entries for $c (their first line: names, placeholder, command bits), and every
    # flag literal of the file that defines cmd_$c, is in the usage.
    bit=B_$(echo "$c" | tr a-z A-Z)
    table=$(grep -E '^ +\{"--?[a-z][a-z0-9-]*", ' "$src/commands.c" | grep -E "\b($bit|B_ALL)\b" |
            sed -E 's/^ +\{"([^"]+)", (NULL|"([^"]+)").*/\1 \3/')
    check "$c: the flag table has entries for it" test -n "$table"
    file=$(grep -lE "^int cmd_$c\(" -r "$src")
    sed -n '/^options:/,/^example:/p' "$c--help.out" >"$c.opts"
    missing=""
    for f in $table $(grep -ohE '"--?[a-z][a-z0-9-]*"' $file | tr -d '"' | sort -u); do
        grep -qE "^ +(-[a-z], )?$f( |,|$)" "$c.opts" || missing="$missing $f"
    done
    check "$c: usage names every flag its parser takes${missing:+ (missing:$missing)}" test -z "$missing"
    # Each listed flag is one the parser takes for $c: the error names the unknown flag after it, or (a value
    # it refuses) the flag and the value 'v'; never the flag as unknown.
    bad=""
    for f in $(grep -oE '^ +(-[a-z], )?--?[a-z][a-z0-9-]*( [^ ]+)?' "$c--help.out" | sed -E 's/^ +(-[a-z], )?//' |
               awk '{print $1 ($2 ? "=V" : "")}'); do
        flag=${f%=V}
        [ "$flag" = --help ] && continue
        echo " $table " | tr '\n' ' ' | grep -q -- " $flag " || { bad="$bad $flag(not-in-table)"; continue; }
        if [ "$f" != "$flag" ]; then "$BENCH" "$c" "$flag" v --zz-unknown >/dev/null 2>flag.err
        else "$BENCH" "$c" "$flag" --zz-unknown >/dev/null 2>flag.err; fi
        rc=$?
        [ $rc -eq 2 ] && [ "$(wc -l <flag.err)" -eq 1 ] &&
            { grep -q "'--zz-unknown'" flag.err || grep -q -- "^cortex-bench: $flag: 'v' " flag.err; } || bad="$bad $flag"
    done
    check "$c: every listed flag is accepted${bad:+ (refused:$bad)}" test -z "$bad"
    for args in "--no-such-flag" "--no-such-flag 1" "-Q"; do
        flag=${args%% *}
        "$BENCH" "$c" $args >bad.out 2>bad.err
        rc=$?
        check "$c $args: exit 2, one stderr line naming $flag, nothing on stdout" \
            test $rc -eq 2 -a "$(wc -l <bad.err)" -eq 1 -a ! -s bad.out
        check "$c $args: the line names '$flag'" grep -q "'$flag'" bad.err
    done
    # A flag that takes a value, given last without one.
    vflag=$(grep -oE '^ +(-[a-z], )?--?[a-z][a-z0-9-]* [^ ]+' "$c--help.out" | sed -E 's/^ +(-[a-z], )?//' | awk 'NR==1{print $1}')
    if [ -n "$vflag" ]; then
        "$BENCH" "$c" "$vflag" >bad.out 2>bad.err
        rc=$?
        check "$c $vflag (no value): exit 2, one line naming it" \
            test $rc -eq 2 -a "$(wc -l <bad.err)" -eq 1 -a ! -s bad.out
        check "$c $vflag (no value): says it needs a value" grep -q -- "$vflag needs a value" bad.err
    fi
done
check "no database was created while checking flags" test ! -e reports
finish bench_help

#!/usr/bin/env bash
# Every ```cpp and ```make excerpt in sdk/README.md (the plugin tutorial) must
# appear verbatim, as consecutive lines, in the template's source or Makefile,
# so the tutorial shows the code CI builds and cannot rot.
set -uo pipefail
readme=$1 source=$2 makefile=$3
src=$(<"$source")
mk=$(<"$makefile")
failures=0 blocks=0
lang="" block="" inside=0 line_no=0 start=0
while IFS= read -r line || [[ -n $line ]]; do
  line_no=$((line_no + 1))
  if [[ $inside -eq 0 && $line =~ ^\`\`\`(cpp|make)$ ]]; then
    inside=1 lang=${BASH_REMATCH[1]} block="" start=$line_no
    continue
  fi
  if [[ $inside -eq 1 && $line == '```' ]]; then
    inside=0 blocks=$((blocks + 1))
    haystack=$src; [[ $lang == make ]] && haystack=$mk
    if [[ "$haystack" != *"$block"* ]]; then
      echo "FAIL: the $lang excerpt at sdk/README.md:$start is not in $( [[ $lang == make ]] && echo "$makefile" || echo "$source"):"
      echo "$block"
      failures=$((failures + 1))
    fi
    continue
  fi
  if [[ $inside -eq 1 ]]; then
    if [[ -z $block ]]; then block=$line; else block+=$'\n'"$line"; fi
  fi
done < "$readme"
if [[ $blocks -lt 5 ]]; then echo "FAIL: found only $blocks excerpts in $readme"; exit 1; fi
[[ $failures -eq 0 ]] && echo "PASS: all $blocks excerpts of the tutorial are in the template"
exit $((failures > 0))

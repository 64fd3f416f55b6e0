#!/usr/bin/env bash
# The text corpus tools/setup.sh makes ($GE2_CORPUS_DIR, default
# /usr/local/share/ge2): the six Jane Austen novels of r-cran-janeaustenr,
# 73,422 lines as the package holds them (its own test counts them per book:
# 16,235 + 15,349 + 7,856 + 8,328 + 13,030 + 12,624), 82 distinct bytes.
set -u -o pipefail
corpus="${GE2_CORPUS_DIR:-/usr/local/share/ge2}/austen.txt"
fail() { echo "corpus_test: $*" >&2; exit 1; }
[ -s "$corpus" ] || fail "no $corpus: run tools/setup.sh"
lines=$(wc -l <"$corpus")
[ "$lines" -eq 73422 ] || fail "$corpus has $lines lines, expected 73422"
# each book's title line where the counts above put it
at=1
for book in "EMMA:16235" "MANSFIELD PARK:15349" "NORTHANGER ABBEY:7856" "Persuasion:8328" \
    "PRIDE AND PREJUDICE:13030" "SENSE AND SENSIBILITY:12624"; do
    title="${book%:*}"
    [ "$(sed -n "${at}p" "$corpus")" = "$title" ] || fail "line $at of $corpus is not the title '$title'"
    at=$((at + ${book##*:}))
done
distinct=$(od -An -v -tu1 "$corpus" | tr -s ' ' '\n' | sed '/^$/d' | sort -un | wc -l)
[ "$distinct" -eq 82 ] || fail "$corpus has $distinct distinct bytes, expected 82"
echo "corpus_test: $corpus: $lines lines, $distinct distinct bytes: ok"

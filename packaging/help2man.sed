# sed -E script for help2man (scripts/package): a forkguard --help text as help2man reads
# it. The NAME section goes (help2man writes NAME from -n); every other heading (SYNOPSIS,
# OPTIONS, EXIT STATUS, ...) becomes help2man's custom-section line "*HEADING*".
1,/^SYNOPSIS$/{/^SYNOPSIS$/!d}
s/^([A-Z][A-Z ]*[A-Z])$/*\1*/

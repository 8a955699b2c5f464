# Sourced by the scripts that take options (alternate.sh, gpu-check.sh, sass-size.sh, stalls.sh): the script's "# Usage: " comment line is
# its synopsis, its comment block from line 2 to `set -uo` its help.
# shellcheck shell=bash
synopsis=$(sed -n 's/^# Usage: /usage: /p' "$0")
# usage MESSAGE: the error, the synopsis, exit 2.
usage() {
	echo "$(basename "$0" .sh): $*" >&2
	echo "$synopsis" >&2
	exit 2
}
# common_opt OPT: what getopts gives besides the script's own options: -h (the help, exit 0), an option without
# its value (:) or an unknown one (usage).
common_opt() {
	case $1 in
	h)
		sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	:) usage "-$OPTARG needs a value" ;;
	*) usage "unknown option -$OPTARG" ;;
	esac
}

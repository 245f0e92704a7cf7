package core

import (
	"strconv"
	"strings"
)

// ParseLetterID splits a letter id, "<member>-<n>", into member and n. It
// is the one reading of a letter id for every door (docs/api.md: letter
// ids are canonical wherever they are read): member is a valid member
// name and n a decimal number of at most 18 digits without sign, space or
// leading zero, so each letter has exactly one id and "reader-+1" or
// "reader-01" names none. Member names may hold hyphens, so n is what
// follows the last one.
func ParseLetterID(id string) (member string, n int, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 || !ValidName(id[:i]) {
		return "", 0, false
	}
	n, ok = canonicalNumber(id[i+1:])
	if !ok {
		return "", 0, false
	}
	return id[:i], n, true
}

// canonicalNumber reads digits as a positive decimal written the one way
// Mailroom writes it (strconv.Itoa): digits only, no leading zero, at
// most 18 of them so that it fits an int. strconv.Atoi alone would take
// "+1" and "0001".
func canonicalNumber(digits string) (int, bool) {
	if digits == "" || digits[0] == '0' || len(digits) > 18 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

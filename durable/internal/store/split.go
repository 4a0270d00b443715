package store

import (
	"fmt"
	"strings"
)

// Syntax selects the lexical rules Split follows.
type Syntax int

const (
	// SQLiteSyntax: CREATE TRIGGER … BEGIN … END is one statement; /* */ comments do not nest.
	SQLiteSyntax Syntax = iota
	// PostgresSyntax: dollar quoting ($$…$$, $tag$…$tag$), E'…' strings with backslash
	// escapes, nested /* */ comments, and BEGIN ATOMIC … END function bodies.
	PostgresSyntax
)

// Split cuts a script into its statements at the semicolons that end them: not those inside
// single-quoted strings, double-quoted identifiers, -- and /* */ comments, PostgreSQL
// dollar-quoted bodies, or the BEGIN … END block of a SQLite trigger or a PostgreSQL BEGIN
// ATOMIC body. Each statement keeps its text (comments included) without the semicolon and
// the surrounding white space; statements with nothing but comments are left out. An
// unterminated string, identifier, comment, dollar quote or block is an error naming its line.
func Split(script string, syn Syntax) ([]string, error) {
	var (
		out     []string
		start   int  // start of the current statement
		hasCode bool // the current statement has something besides comments and space
		depth   int  // open BEGIN/CASE blocks of a trigger or BEGIN ATOMIC body
		words   []string
		trigger bool // the current statement is CREATE [TEMP] TRIGGER (SQLite)
		atomic  bool // the previous word was BEGIN, in a PostgreSQL statement
	)
	line := func(i int) int { return strings.Count(script[:i], "\n") + 1 }
	n := len(script)
	for i := 0; i < n; {
		c := script[i]
		switch {
		case c == '-' && i+1 < n && script[i+1] == '-':
			end := strings.IndexByte(script[i:], '\n')
			if end < 0 {
				i = n
			} else {
				i += end + 1
			}
			continue
		case c == '/' && i+1 < n && script[i+1] == '*':
			j, ok := skipBlockComment(script, i, syn == PostgresSyntax)
			if !ok {
				return nil, fmt.Errorf("unterminated /* comment starting on line %d", line(i))
			}
			i = j
			continue
		case c == '\'':
			backslash := syn == PostgresSyntax && i > 0 && (script[i-1] == 'E' || script[i-1] == 'e') &&
				(i < 2 || !identChar(script[i-2]))
			j, ok := skipQuoted(script, i, '\'', backslash)
			if !ok {
				return nil, fmt.Errorf("unterminated string starting on line %d", line(i))
			}
			hasCode, i = true, j
			continue
		case c == '"':
			j, ok := skipQuoted(script, i, '"', false)
			if !ok {
				return nil, fmt.Errorf("unterminated quoted identifier starting on line %d", line(i))
			}
			hasCode, i = true, j
			continue
		case c == '$' && syn == PostgresSyntax && (i == 0 || !identChar(script[i-1])):
			if tag, ok := dollarTag(script[i:]); ok {
				end := strings.Index(script[i+len(tag):], tag)
				if end < 0 {
					return nil, fmt.Errorf("unterminated dollar quote %s starting on line %d", tag, line(i))
				}
				hasCode, i = true, i+len(tag)+end+len(tag)
				continue
			}
		case c == ';':
			if depth > 0 {
				i++
				continue
			}
			if hasCode {
				out = append(out, strings.TrimSpace(script[start:i]))
			}
			i++
			start, hasCode, words, trigger, atomic = i, false, words[:0], false, false
			continue
		case isWordStart(c):
			j := i
			for j < n && identChar(script[j]) {
				j++
			}
			w := strings.ToUpper(script[i:j])
			hasCode = true
			if len(words) < 3 {
				words = append(words, w)
				if syn == SQLiteSyntax && words[0] == "CREATE" && w == "TRIGGER" {
					trigger = true
				}
			}
			switch {
			case trigger && w == "BEGIN", (trigger || depth > 0) && w == "CASE":
				depth++
			case syn == PostgresSyntax && atomic && w == "ATOMIC":
				depth++
			case depth > 0 && w == "END":
				depth--
			}
			atomic = syn == PostgresSyntax && w == "BEGIN"
			i = j
			continue
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			hasCode = true
		}
		i++
	}
	if depth > 0 {
		return nil, fmt.Errorf("unterminated BEGIN … END block in the statement starting on line %d", line(start))
	}
	if hasCode {
		out = append(out, strings.TrimSpace(script[start:]))
	}
	return out, nil
}

func isWordStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func identChar(c byte) bool {
	return isWordStart(c) || (c >= '0' && c <= '9') || c == '$'
}

// skipQuoted returns the index after the quote q that closes the one at i; a doubled q is an
// escaped one, and so is a backslashed one when backslash is set.
func skipQuoted(s string, i int, q byte, backslash bool) (int, bool) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if backslash {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return 0, false
}

// skipBlockComment returns the index after the comment opened at i; PostgreSQL's comments nest.
func skipBlockComment(s string, i int, nested bool) (int, bool) {
	depth := 0
	for j := i; j+1 < len(s); j++ {
		switch {
		case s[j] == '/' && s[j+1] == '*' && (nested || depth == 0):
			depth++
			j++
		case s[j] == '*' && s[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

// dollarTag returns the dollar-quote opener at the start of s ($$ or $tag$), if there is one.
// A $ followed by a digit is a parameter, not a quote.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1], true
		case isWordStart(c), c >= '0' && c <= '9' && j > 1:
		default:
			return "", false
		}
	}
	return "", false
}

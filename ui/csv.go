package ui

import "strings"

// formulaStarts are the first characters that make a spreadsheet read a
// cell as a formula (OWASP, "CSV Injection"): =, +, - and @, and tab and
// carriage return, which some spreadsheets skip before looking for one.
const formulaStarts = "=+-@\t\r"

// spreadsheetCells returns cells with a single quote put before each one
// that starts with a formula character, so that a spreadsheet opening the
// export shows the text instead of evaluating it: an author, source,
// origin or message is whatever a bucket writer put in the metadata, and
// =HYPERLINK(…) there would run on an auditor's machine. Every cell goes
// through it, not only those: a column added later is covered too, and
// the others (times, apps, numbers) never start with one of these.
func spreadsheetCells(cells ...string) []string {
	for i, c := range cells {
		if c != "" && strings.IndexByte(formulaStarts, c[0]) >= 0 {
			cells[i] = "'" + c
		}
	}
	return cells
}

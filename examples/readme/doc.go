// Package readme holds the Go snippets of the repository's README and of
// its docs pages as code that compiles: every Go block of README.md and
// docs/*.md is a run of lines of a file of this package (or of an
// example's main.go), and a test checks it, so that what users copy from
// them builds as shown.
package readme

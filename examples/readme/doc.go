// Package readme holds the Go snippets of the repository's README as code
// that compiles: every Go block of the README is a run of lines of a file
// of this package (or of an example's main.go), and a test checks it, so
// that what users copy from the README builds as shown.
package readme

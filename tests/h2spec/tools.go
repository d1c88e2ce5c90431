//go:build tools

// The test set-up builds h2spec 2.2.1 (github.com/summerwind/h2spec) from
// this module, its dependencies pinned in go.mod to versions that Debian 12's
// Go 1.19 builds: go build -o DIR/h2spec github.com/summerwind/h2spec/cmd/h2spec
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"

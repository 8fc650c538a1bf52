// A factory shaped like Spin Cycle 2.1.1's dev jobs (`noop`, `sleep`, `shell-command`),
// served to Spindle under those names: the config's `types:` names them, so they take
// the built-ins' place (docs/migrating.md, step 3).
package main

import (
	spindle "spindle/sdk/go"

	"spincycle-dev-jobs/jobs"
)

func main() { spindle.Serve(jobs.Factory) }

// A Spin Cycle jobs repository served to Spindle: the jobs package is written against
// Spin Cycle's job interface; only its imports name Spindle's Go kit.
package main

import (
	spindle "spindle/sdk/go"

	"go-jobs/jobs"
)

func main() { spindle.Serve(jobs.Factory) }

//go:build !linux

package spindle

import "fmt"

// guardParent: only Linux tells a process of its parent's death; elsewhere a program
// must run under the Job Runner's supervisor.
func guardParent(parent string) error {
	if parent == "" {
		return nil
	}
	return fmt.Errorf("SPINDLE_JOB_PARENT_PID is set, but this kit guards against the Job Runner's death only on Linux; remove `supervised: false` from the program's config")
}

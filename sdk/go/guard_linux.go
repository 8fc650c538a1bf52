//go:build linux

package spindle

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// guardParent makes this program end its whole process group, the job's own children
// included, when the process that started it dies. A Job Runner that does not supervise
// the program (its config says `supervised: false`) names itself in
// SPINDLE_JOB_PARENT_PID; empty, there is nothing to do. The kernel sends SIGUSR1 when the
// parent dies (PR_SET_PDEATHSIG); a SIGUSR1 while the parent lives is ignored.
func guardParent(parent string) error {
	if parent == "" {
		return nil
	}
	want, err := strconv.Atoi(parent)
	if err != nil || want <= 1 {
		return fmt.Errorf("SPINDLE_JOB_PARENT_PID is %q; expected the process id of the Job Runner", parent)
	}
	died := make(chan os.Signal, 1)
	signal.Notify(died, syscall.SIGUSR1)
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGUSR1), 0); errno != 0 {
		return fmt.Errorf("cannot ask for a signal at the Job Runner's death (prctl PR_SET_PDEATHSIG): %v", errno)
	}
	go func() {
		for range died {
			if os.Getppid() != want {
				endGroup()
			}
		}
	}()
	// The runner may have died before the request took effect.
	if os.Getppid() != want {
		endGroup()
	}
	return nil
}

// endGroup kills this program's process group, itself included.
func endGroup() {
	_ = syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
	os.Exit(128 + int(syscall.SIGKILL))
}

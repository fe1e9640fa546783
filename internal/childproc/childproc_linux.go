package childproc

import (
	"os/exec"
	"syscall"
)

// lockThread: see Start; Pdeathsig is per thread.
const lockThread = true

func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: the whole group is signalled, whatever the
		// child may have spawned.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
}

func terminate(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }

func kill(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

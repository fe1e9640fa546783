//go:build !linux

package childproc

import (
	"os"
	"os/exec"
)

const lockThread = false

func setProcAttr(*exec.Cmd) {}

func terminate(cmd *exec.Cmd) {
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		_ = cmd.Process.Kill() // no interrupt on this platform (Windows)
	}
}

func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

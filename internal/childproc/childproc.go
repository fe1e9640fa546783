// Package childproc runs the child processes of tests and test harnesses
// (a Consul agent, the test binary run again as another node) so that they
// die with the process that started them, even when it is killed by a
// timeout, and can be stopped gracefully or killed.
package childproc

import (
	"os/exec"
	"runtime"
	"time"
)

// Process is one run of a started command.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and was reaped
	err  error         // cmd.Wait's result, set before done is closed
}

// Start starts cmd from a goroutine that stays on its OS thread until the
// process exits. On Linux the child gets SIGKILL when the thread that
// started it dies (Pdeathsig), so that a test binary killed by a timeout
// leaves no orphan behind; keeping that thread alive (and locked to this
// goroutine) for the child's whole life is what stops the Go runtime from
// retiring it early and killing a healthy child. The child runs in its own
// process group, which Stop signals whole.
//
// Anything cmd.Wait waits for (a pipe's copying goroutine) must end for
// Done to close: pipes from StdoutPipe and the like are read by the
// caller, who must read them to the end.
func Start(cmd *exec.Cmd) (*Process, error) {
	setProcAttr(cmd)
	p := &Process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		if lockThread {
			// Never unlocked on purpose: when this goroutine ends the thread
			// ends with it, and by then the child is already gone.
			runtime.LockOSThread()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Exited reports whether the process has exited and was reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed once the process has exited and was reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err waits until the process has exited and returns how it ended
// (cmd.Wait's error: nil for exit status 0).
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop asks the process to terminate, kills it after grace (at once when
// grace is 0) and waits until it was reaped.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	if grace > 0 {
		terminate(p.cmd)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	kill(p.cmd)
	<-p.done
}

//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package emulator

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir creates dir's lock file without locking it: this platform has no
// flock, and two emulators on one directory are the user's to avoid.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return f, nil
}

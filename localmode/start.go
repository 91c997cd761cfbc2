package localmode

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/bucketops/bucketops/emulator"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

// StartEmulator starts the embedded emulator (cfg without an address)
// where the last run with this data directory had it, so
// STORAGE_EMULATOR_HOST in a terminal stays right, or on a free port when
// that one is taken, which it logs.
func (s *State) StartEmulator(ctx context.Context, cfg emulator.Config, log *slog.Logger) (*emulator.Emulator, error) {
	if last := s.Addr("emulator", ""); last != "" {
		cfg.Addr = last
		emu, err := emulator.Start(ctx, cfg)
		if err == nil {
			return emu, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
		log.Warn("local mode: the emulator's last address is taken; it moves, source the new export lines", "address", last, "error", err)
		cfg.Addr = ""
	}
	emu, err := emulator.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return emu, nil
}

// Seed publishes every app directory under dir that isn't an app yet: a
// directory that directly holds manifest files is the app named by its path
// (examples/dev/guestbook is dev/guestbook). An app that already has a
// release, seeded or pushed since, is left alone.
func Seed(ctx context.Context, st *store.Store, dir string, log *slog.Logger) error {
	apps := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir // as AssembleDir does
		}
		if !d.IsDir() && !strings.HasPrefix(d.Name(), ".") && render.IsManifest(d.Name()) {
			rel, err := filepath.Rel(dir, filepath.Dir(path))
			if err != nil {
				return err
			}
			apps[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	names := make([]string, 0, len(apps))
	for app := range apps {
		names = append(names, app)
	}
	sort.Strings(names)
	for _, app := range names {
		rel, err := render.AssembleDir(filepath.Join(dir, filepath.FromSlash(app)))
		if err != nil {
			return err
		}
		noHead := int64(0)
		res, err := st.Publish(ctx, app, store.Publication{
			Data: rel.Bytes, Resources: rel.Resources(), Author: "bucketops-bridge --seed",
			Source: filepath.ToSlash(filepath.Join(dir, app)), IfGeneration: &noHead,
		})
		switch {
		case errors.Is(err, store.ErrConflict):
			log.Info("not seeded: the app already has releases", "app", app)
		case err != nil:
			return err
		default:
			log.Info("seeded", "app", app, "generation", res.Generation)
		}
	}
	return nil
}

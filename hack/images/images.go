/*
Copyright 2026 The agentlane Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// nonRoot is the numeric user of the agentlane images, so that
	// runAsNonRoot can be verified without /etc/passwd.
	nonRoot = "65532:65532"
	// pauseUser is the user of the pause image, as in Kubernetes' own.
	pauseUser = "65535:65535"
	// caBundlePath is where the images hold the CA bundle, for TLS from
	// the binaries.
	caBundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// image is one image to write: a single layer on an empty base.
type image struct {
	ref     name.Tag
	entries []entry
	config  v1.Config
}

// inputs are the host files the images are made of.
type inputs struct {
	// bin is the directory of the static linux binaries manager, worker,
	// agent and pause.
	bin string
	// caBundle is the CA bundle to include, if not empty.
	caBundle string
	// busybox is a static busybox that runs on this machine, for the shell
	// image.
	busybox string
}

// binaries are agentlane's own programs, at the root of its images.
func (in inputs) binaries() []entry {
	var out []entry
	for _, b := range []string{"manager", "worker", "agent"} {
		out = append(out, file("/"+b, filepath.Join(in.bin, b), 0o755))
	}
	if in.caBundle != "" {
		out = append(out, file(caBundlePath, in.caBundle, 0o644))
	}
	return out
}

// agentlaneImage is the image of the Dockerfile: the manager (entrypoint),
// the worker and the agent, with nothing else to run.
func agentlaneImage(ref name.Tag, in inputs) (image, error) {
	return image{
		ref:     ref,
		entries: in.binaries(),
		config:  v1.Config{Entrypoint: []string{"/manager"}, User: nonRoot},
	}, nil
}

// shellImage is agentlaneImage plus busybox in /bin, for worker pools and
// session runtimes whose tasks run shell commands: the worker's bash executor
// falls back to sh -c. Its entrypoint is the worker.
func shellImage(ref name.Tag, in inputs) (image, error) {
	applets, err := busyboxApplets(in.busybox)
	if err != nil {
		return image{}, err
	}
	entries := append(in.binaries(),
		file("/bin/busybox", in.busybox, 0o755),
		// Scratch space for pods that mount none.
		dir("/tmp", 0o777|os.ModeSticky),
	)
	for _, a := range applets {
		entries = append(entries, symlink("/bin/"+a, "/bin/busybox"))
	}
	return image{
		ref:     ref,
		entries: entries,
		config:  v1.Config{Entrypoint: []string{"/worker"}, User: nonRoot, Env: []string{"PATH=/bin"}},
	}, nil
}

// pauseImage is a pod sandbox image for containerd's sandbox_image.
func pauseImage(ref name.Tag, in inputs) (image, error) {
	return image{
		ref:     ref,
		entries: []entry{file("/pause", filepath.Join(in.bin, "pause"), 0o755)},
		config:  v1.Config{Entrypoint: []string{"/pause"}, User: pauseUser},
	}, nil
}

// busyboxApplets returns the applets that busybox --list prints, but busybox
// itself.
func busyboxApplets(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", busybox, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if strings.Contains(a, "/") {
			return nil, fmt.Errorf("%s --list printed %q, not an applet name", busybox, a)
		}
		if a != "busybox" {
			applets = append(applets, a)
		}
	}
	if !slices.Contains(applets, "sh") {
		return nil, fmt.Errorf("%s has no sh applet", busybox)
	}
	return applets, nil
}

// build returns the image for linux/arch.
func (im image) build(arch string) (v1.Image, error) {
	l, err := layer(im.entries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", im.ref, err)
	}
	base, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		OS:           "linux",
		Architecture: arch,
		Config:       im.config,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{
		Layer:   l,
		History: v1.History{CreatedBy: "hack/images", Created: v1.Time{Time: modTime}},
	})
}

// archiveName is the file name of ref's archive: the last element of its
// repository, so agentlane:dev is written to agentlane.tar.
func archiveName(ref name.Tag) string {
	return path.Base(ref.RepositoryStr()) + ".tar"
}

// write writes im for linux/arch as an archive in the format of docker save,
// tagged with im.ref as given (agentlane:dev, not a normalized name: the
// importer normalizes it as the kubelet normalizes a pod's image), and
// returns its path. The archive appears complete or not at all.
func (im image) write(dir, arch string) (string, error) {
	img, err := im.build(arch)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, archiveName(im.ref))
	tmp, err := os.CreateTemp(dir, ".tmp-"+archiveName(im.ref))
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(im.ref, img, tmp); err != nil {
		tmp.Close()
		return "", fmt.Errorf("%s: %w", im.ref, err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp.Name(), dst)
}

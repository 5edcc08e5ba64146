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
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// node is a file of an image as a user of the container sees it.
type node struct {
	Mode    string // as ls -l prints it, "drwxr-xr-x"
	Owner   string // uid:gid
	Content string // of a regular file
	Link    string // of a symbolic link
}

// runs is how an image runs.
type runs struct {
	Platform   string
	Entrypoint []string
	User       string
	Env        []string
}

// host is a machine with fake binaries, a fake CA bundle and a fake busybox
// whose --list prints applets.
type host struct {
	options
}

func newHost(t *testing.T, applets ...string) host {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, content string, perm os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), perm); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"manager", "worker", "agent", "pause"} {
		// Mode 0600 on the host: the images make them executable.
		write(filepath.Join(bin, b), b+" binary", 0o600)
	}
	busybox := filepath.Join(dir, "busybox")
	write(busybox, "#!/bin/sh\nprintf '%s\\n' busybox "+strings.Join(applets, " ")+"\n", 0o755)
	ca := filepath.Join(dir, "ca.crt")
	write(ca, "CA bundle", 0o600)
	return host{options{
		bin:        bin,
		out:        filepath.Join(dir, "images"),
		image:      "agentlane:dev",
		shellImage: "agentlane-shell:dev",
		pauseImage: "agentlane-pause:dev",
		busybox:    busybox,
		caBundle:   ca,
		arch:       "amd64",
	}}
}

// readArchive returns the references an archive is tagged with, and the files
// and config of its only image.
func readArchive(t *testing.T, path string) ([]string, map[string]node, runs) {
	t.Helper()
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 {
		t.Fatalf("%s holds %d images, want 1", path, len(manifest))
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 || len(cf.RootFS.DiffIDs) != 1 {
		t.Errorf("%s: %d layers and %d diff IDs, want 1 of each", path, len(layers), len(cf.RootFS.DiffIDs))
	}
	return manifest[0].RepoTags, files(t, img), runs{
		Platform:   cf.Platform().String(),
		Entrypoint: cf.Config.Entrypoint,
		User:       cf.Config.User,
		Env:        cf.Config.Env,
	}
}

// files returns the file system of img.
func files(t *testing.T, img v1.Image) map[string]node {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]node{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out["/"+strings.TrimSuffix(hdr.Name, "/")] = node{
			Mode:    hdr.FileInfo().Mode().String(),
			Owner:   fmt.Sprintf("%d:%d", hdr.Uid, hdr.Gid),
			Content: string(data),
			Link:    hdr.Linkname,
		}
	}
}

var (
	dir0755 = node{Mode: "drwxr-xr-x", Owner: "0:0"}
	tmp     = node{Mode: "dtrwxrwxrwx", Owner: "0:0"}
)

func executable(content string) node {
	return node{Mode: "-rwxr-xr-x", Owner: "0:0", Content: content}
}

func link(target string) node {
	return node{Mode: "Lrwxrwxrwx", Owner: "0:0", Link: target}
}

// binaries are the files agentlane:dev holds, and agentlane-shell:dev too.
func binaries(ca bool) map[string]node {
	fs := map[string]node{
		"/manager": executable("manager binary"),
		"/worker":  executable("worker binary"),
		"/agent":   executable("agent binary"),
	}
	if ca {
		fs["/etc"] = dir0755
		fs["/etc/ssl"] = dir0755
		fs["/etc/ssl/certs"] = dir0755
		fs["/etc/ssl/certs/ca-certificates.crt"] = node{Mode: "-rw-r--r--", Owner: "0:0", Content: "CA bundle"}
	}
	return fs
}

func with(fs map[string]node, more map[string]node) map[string]node {
	for p, n := range more {
		fs[p] = n
	}
	return fs
}

func TestWriteImages(t *testing.T) {
	type archive struct {
		refs  []string
		files map[string]node
		runs  runs
	}
	cases := map[string]struct {
		noCABundle bool
		applets    []string
		want       map[string]archive // by file name
	}{
		"all three images": {
			applets: []string{"sh", "sleep", "["},
			want: map[string]archive{
				"agentlane.tar": {
					refs:  []string{"agentlane:dev"},
					files: binaries(true),
					runs:  runs{Platform: "linux/amd64", Entrypoint: []string{"/manager"}, User: "65532:65532"},
				},
				"agentlane-shell.tar": {
					refs: []string{"agentlane-shell:dev"},
					files: with(binaries(true), map[string]node{
						"/bin":         dir0755,
						"/bin/busybox": executable(""), // replaced by the fake busybox below
						"/bin/sh":      link("/bin/busybox"),
						"/bin/sleep":   link("/bin/busybox"),
						"/bin/[":       link("/bin/busybox"),
						"/tmp":         tmp,
					}),
					runs: runs{Platform: "linux/amd64", Entrypoint: []string{"/worker"}, User: "65532:65532", Env: []string{"PATH=/bin"}},
				},
				"agentlane-pause.tar": {
					refs:  []string{"agentlane-pause:dev"},
					files: map[string]node{"/pause": executable("pause binary")},
					runs:  runs{Platform: "linux/amd64", Entrypoint: []string{"/pause"}, User: "65535:65535"},
				},
			},
		},
		"no CA bundle on the host": {
			noCABundle: true,
			applets:    []string{"sh"},
			want: map[string]archive{
				"agentlane.tar": {
					refs:  []string{"agentlane:dev"},
					files: binaries(false),
					runs:  runs{Platform: "linux/amd64", Entrypoint: []string{"/manager"}, User: "65532:65532"},
				},
				"agentlane-shell.tar": {
					refs: []string{"agentlane-shell:dev"},
					files: with(binaries(false), map[string]node{
						"/bin":         dir0755,
						"/bin/busybox": executable(""),
						"/bin/sh":      link("/bin/busybox"),
						"/tmp":         tmp,
					}),
					runs: runs{Platform: "linux/amd64", Entrypoint: []string{"/worker"}, User: "65532:65532", Env: []string{"PATH=/bin"}},
				},
				"agentlane-pause.tar": {
					refs:  []string{"agentlane-pause:dev"},
					files: map[string]node{"/pause": executable("pause binary")},
					runs:  runs{Platform: "linux/amd64", Entrypoint: []string{"/pause"}, User: "65535:65535"},
				},
			},
		},
	}
	for desc, tc := range cases {
		t.Run(desc, func(t *testing.T) {
			h := newHost(t, tc.applets...)
			if tc.noCABundle {
				h.caBundle = filepath.Join(t.TempDir(), "missing.crt")
			}
			busybox, err := os.ReadFile(h.busybox)
			if err != nil {
				t.Fatal(err)
			}

			written, err := writeImages(h.options)
			if err != nil {
				t.Fatal(err)
			}

			got := map[string]string{}
			for _, a := range written {
				got[filepath.Base(a.path)] = a.ref.String()
				if filepath.Dir(a.path) != h.out {
					t.Errorf("%s written outside %s", a.path, h.out)
				}
			}
			want := map[string]string{}
			for file, a := range tc.want {
				want[file] = a.refs[0]
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("archives written (-want,+got):\n%s", diff)
			}

			for file, a := range tc.want {
				refs, fs, runs := readArchive(t, filepath.Join(h.out, file))
				if diff := cmp.Diff(a.refs, refs); diff != "" {
					t.Errorf("%s: references (-want,+got):\n%s", file, diff)
				}
				if n, ok := a.files["/bin/busybox"]; ok {
					n.Content = string(busybox)
					a.files["/bin/busybox"] = n
				}
				if diff := cmp.Diff(a.files, fs); diff != "" {
					t.Errorf("%s: files (-want,+got):\n%s", file, diff)
				}
				if diff := cmp.Diff(a.runs, runs); diff != "" {
					t.Errorf("%s: config (-want,+got):\n%s", file, diff)
				}
			}
		})
	}
}

// TestWriteImagesReproducible checks that the same inputs give the same
// images, so that importing them again changes nothing.
func TestWriteImagesReproducible(t *testing.T) {
	h := newHost(t, "sh")
	digests := func() []string {
		written, err := writeImages(h.options)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range written {
			img, err := tarball.ImageFromPath(a.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d.String())
		}
		return out
	}
	first := digests()
	if diff := cmp.Diff(first, digests()); diff != "" {
		t.Errorf("digests of a second run (-first,+second):\n%s", diff)
	}
}

func TestWriteImagesErrors(t *testing.T) {
	cases := map[string]struct {
		applets []string
		change  func(*options)
		want    string
	}{
		"a busybox without sh": {
			applets: []string{"sleep"},
			want:    "has no sh applet",
		},
		"two references with one archive name": {
			applets: []string{"sh"},
			change:  func(o *options) { o.shellImage = "example.com/team/agentlane:v2" },
			want:    "would both be written to agentlane.tar",
		},
		"a missing binary": {
			applets: []string{"sh"},
			change:  func(o *options) { o.bin = filepath.Join(o.out, "nothing") },
			want:    "no such file",
		},
		"an invalid reference": {
			applets: []string{"sh"},
			change:  func(o *options) { o.image = "Agentlane:dev" },
			want:    "repository can only contain",
		},
	}
	for desc, tc := range cases {
		t.Run(desc, func(t *testing.T) {
			h := newHost(t, tc.applets...)
			if tc.change != nil {
				tc.change(&h.options)
			}
			_, err := writeImages(h.options)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("writeImages() = %v, want an error containing %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(h.out); len(entries) > 0 {
				t.Errorf("%s holds %d files after a failure, want none", h.out, len(entries))
			}
		})
	}
}

// TestArchiveName checks that archives are named after their repository.
func TestArchiveName(t *testing.T) {
	for ref, want := range map[string]string{
		"agentlane:dev":                         "agentlane.tar",
		"agentlane-shell:dev":                   "agentlane-shell.tar",
		"example.com/team/agentlane-pause:v1.2": "agentlane-pause.tar",
	} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := archiveName(tag); got != want {
			t.Errorf("archiveName(%s) = %s, want %s", ref, got, want)
		}
	}
}

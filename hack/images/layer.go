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
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// modTime is the modification time of every file in a layer, so that the same
// inputs give the same layer digest.
var modTime = time.Unix(0, 0).UTC()

// entry is one file of a layer: a regular file copied from the host, a
// directory or a symbolic link. Every entry is owned by root.
type entry struct {
	// path is the absolute path in the image.
	path string
	// mode is the permission bits, with fs.ModeDir or fs.ModeSymlink for
	// those kinds.
	mode fs.FileMode
	// src is the host file that a regular file's content comes from.
	src string
	// target is a symbolic link's target.
	target string
}

func file(p, src string, perm fs.FileMode) entry { return entry{path: p, mode: perm, src: src} }

func dir(p string, perm fs.FileMode) entry { return entry{path: p, mode: fs.ModeDir | perm} }

func symlink(p, target string) entry {
	return entry{path: p, mode: fs.ModeSymlink | 0o777, target: target}
}

// layer returns a layer that holds entries in path order, each preceded by its
// parent directories (0755 unless entries name them). The tar stream is built
// in memory; go-containerregistry compresses it and computes the digests.
func layer(entries []entry) (v1.Layer, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.path, b.path) })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	written := map[string]bool{}
	for _, e := range entries {
		if !path.IsAbs(e.path) || path.Clean(e.path) != e.path || e.path == "/" {
			return nil, fmt.Errorf("%q is not a clean absolute path of a file", e.path)
		}
		if written[e.path] {
			return nil, fmt.Errorf("%s is in the layer twice", e.path)
		}
		if err := writeParents(tw, e.path, written); err != nil {
			return nil, err
		}
		if err := writeEntry(tw, e); err != nil {
			return nil, err
		}
		written[e.path] = true
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

// writeParents writes the directories above p that are not written yet.
func writeParents(tw *tar.Writer, p string, written map[string]bool) error {
	var missing []string
	for d := path.Dir(p); d != "/" && !written[d]; d = path.Dir(d) {
		missing = append(missing, d)
	}
	for _, d := range slices.Backward(missing) {
		if err := writeEntry(tw, dir(d, 0o755)); err != nil {
			return err
		}
		written[d] = true
	}
	return nil
}

func writeEntry(tw *tar.Writer, e entry) error {
	hdr := &tar.Header{
		Name:    strings.TrimPrefix(e.path, "/"),
		Mode:    int64(e.mode.Perm()),
		ModTime: modTime,
	}
	if e.mode&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	switch {
	case e.mode.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case e.mode&fs.ModeSymlink != 0:
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = e.target
		return tw.WriteHeader(hdr)
	}
	data, err := os.ReadFile(e.src)
	if err != nil {
		return err
	}
	hdr.Typeflag = tar.TypeReg
	hdr.Size = int64(len(data))
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}

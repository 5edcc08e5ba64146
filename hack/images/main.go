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

// Command images writes agentlane's container images as image archives,
// without a container engine, from static linux binaries built beforehand
// (`make images` builds them and runs it):
//
//	go run ./hack/images --bin=bin/images-bin --out=bin/images \
//	    --image=agentlane:dev --shell-image=agentlane-shell:dev --pause-image=agentlane-pause:dev
//
// Each image is one layer on an empty base, written to its own archive named
// after the last element of its repository:
//
//	agentlane.tar        /manager, /worker, /agent and the host's CA bundle;
//	                     user 65532:65532, entrypoint /manager. The image of
//	                     the Dockerfile.
//	agentlane-shell.tar  the same plus a static busybox in /bin with a link per
//	                     applet (sh, cat, sleep, ...); entrypoint /worker,
//	                     PATH=/bin. For workers and session runtimes that run
//	                     shell commands.
//	agentlane-pause.tar  /pause, a pod sandbox for containerd's sandbox_image.
//
// The archives have the layout of `docker save` and carry the references as
// given; `ctr -n k8s.io images import` normalizes a short reference such as
// agentlane:dev the way the kubelet normalizes a pod's image, so the pod finds
// the imported image.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
)

// options are the command's flags.
type options struct {
	bin, out                      string
	image, shellImage, pauseImage string
	busybox, caBundle             string
	arch                          string
}

// archive is a written image archive.
type archive struct {
	path string
	ref  name.Tag
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/images-bin", "directory of the static linux binaries manager, worker, agent and pause")
	flag.StringVar(&o.out, "out", "bin/images", "directory to write the archives to")
	flag.StringVar(&o.image, "image", "agentlane:dev", "reference of the agentlane image (manager, worker, agent)")
	flag.StringVar(&o.shellImage, "shell-image", "agentlane-shell:dev", "reference of the agentlane image with busybox; empty to skip it")
	flag.StringVar(&o.pauseImage, "pause-image", "agentlane-pause:dev", "reference of the pod sandbox image; empty to skip it")
	flag.StringVar(&o.busybox, "busybox", "/bin/busybox", "static busybox for the shell image; it must run here, so build for this machine's architecture")
	flag.StringVar(&o.caBundle, "ca-bundle", caBundlePath, "CA bundle to include, when the file exists")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "architecture of the binaries, recorded in the images")
	flag.Parse()

	archives, err := writeImages(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	for _, a := range archives {
		fmt.Printf("%s\t%s\n", a.path, a.ref)
	}
}

// writeImages writes the images o names into o.out.
func writeImages(o options) ([]archive, error) {
	in := inputs{bin: o.bin, busybox: o.busybox}
	switch _, err := os.Stat(o.caBundle); {
	case err == nil:
		in.caBundle = o.caBundle
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}

	var images []image
	names := map[string]string{}
	for _, i := range []struct {
		ref   string
		build func(name.Tag, inputs) (image, error)
	}{
		{o.image, agentlaneImage},
		{o.shellImage, shellImage},
		{o.pauseImage, pauseImage},
	} {
		if i.ref == "" {
			continue
		}
		ref, err := name.NewTag(i.ref)
		if err != nil {
			return nil, err
		}
		if other, ok := names[archiveName(ref)]; ok {
			return nil, fmt.Errorf("%s and %s would both be written to %s", other, i.ref, archiveName(ref))
		}
		names[archiveName(ref)] = i.ref
		im, err := i.build(ref, in)
		if err != nil {
			return nil, err
		}
		images = append(images, im)
	}

	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	var archives []archive
	for _, im := range images {
		p, err := im.write(o.out, o.arch)
		if err != nil {
			return nil, err
		}
		archives = append(archives, archive{path: p, ref: im.ref})
	}
	return archives, nil
}

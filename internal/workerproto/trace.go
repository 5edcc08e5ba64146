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

package workerproto

// TraceparentAnnotation holds, on an ExternalTask the Session API created
// while tracing is on, the W3C traceparent of the command's submit span: the
// parent of the manager's dispatch and result spans and of the worker's run
// span. It rides the create that makes the task; nothing writes it later.
// Whoever may create ExternalTasks can set it, so its readers accept only
// a valid version-00 traceparent and start a new trace otherwise. A Direct
// task carries its trace context in DirectTask.Traceparent instead.
const TraceparentAnnotation = "agentlane.io/traceparent"

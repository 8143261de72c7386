{{/*
The spec of a ValidatingAdmissionPolicy that holds one ServiceAccount's Node writes (nodes and
nodes/status) to our taints, verified label and condition (progress is in NodeVerifications, not on
the Node): a verification taint may be removed, never added; the verified label may be set, never
removed; annotations are never changed. Used for the controller (admission-policies.yaml) and, with
ownNodeOnly, for the DaemonSet agent (daemonset.yaml), whose pods may write only their own node. Arguments: root (the chart's context), user (the
ServiceAccount's user name), matchName, who (the writer, in messages), ownNodeOnly.
*/}}
{{- define "kube-node-ready.nodeWritesPolicySpec" -}}
{{- $nm := .root.Values.config.nodeManagement }}
{{- $who := .who }}
{{- $verification := list }}
{{- range $nm.taints }}{{ $verification = append $verification .key }}{{ end }}
{{- $ours := $verification }}
{{- if $nm.failedTaint.enabled }}{{ $ours = append $ours $nm.failedTaint.key }}{{ end }}
{{- $verificationList := uniq $verification | toJson }}
{{- $oursList := uniq $ours | toJson }}
{{- $label := $nm.verifiedLabel.key | toJson }}
{{- $condition := $nm.condition.type | toJson -}}
failurePolicy: Fail
matchConstraints:
  resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["UPDATE"]
      resources: ["nodes", "nodes/status"]
matchConditions:
  - name: {{ .matchName }}
    expression: request.userInfo.username == {{ .user | toJson }}
variables:
  - name: ourTaints
    expression: {{ $oursList | toJson }}
  - name: verificationTaints
    expression: {{ $verificationList | toJson }}
  - name: oldTaints
    expression: "has(oldObject.spec.taints) ? oldObject.spec.taints : []"
  - name: newTaints
    expression: "has(object.spec.taints) ? object.spec.taints : []"
  - name: oldLabels
    expression: "has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"
  - name: newLabels
    expression: "has(object.metadata.labels) ? object.metadata.labels : {}"
  - name: oldAnnotations
    expression: "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"
  - name: newAnnotations
    expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"
  - name: oldConditions
    expression: "has(oldObject.status) && has(oldObject.status.conditions) ? oldObject.status.conditions : []"
  - name: newConditions
    expression: "has(object.status) && has(object.status.conditions) ? object.status.conditions : []"
validations:
  {{- if .ownNodeOnly }}
  # The node name the API server put in the pod-bound token of the request (ServiceAccount tokens
  # of pods carry it since Kubernetes 1.30; GA in 1.32): only the node this pod runs on.
  - expression: >-
      has(request.userInfo.extra) && 'authentication.kubernetes.io/node-name' in request.userInfo.extra &&
      request.userInfo.extra['authentication.kubernetes.io/node-name'].size() == 1 &&
      request.userInfo.extra['authentication.kubernetes.io/node-name'][0] == object.metadata.name
    message: "metadata.name: {{ $who }} may write only the node its own pod runs on (the node name in its pod-bound ServiceAccount token)"
  {{- end }}
  - expression: variables.newTaints.filter(t, !(t.key in variables.ourTaints)) == variables.oldTaints.filter(t, !(t.key in variables.ourTaints))
    message: "spec.taints: {{ $who }} may change only its own taints ({{ join ", " (uniq $ours) }})"
  - expression: variables.newTaints.all(t, !(t.key in variables.verificationTaints) || variables.oldTaints.exists(o, o.key == t.key && o.effect == t.effect))
    message: "spec.taints: {{ $who }} may remove a verification taint ({{ join ", " (uniq $verification) }}), never add one"
  - expression: (has(object.spec.unschedulable) && object.spec.unschedulable) == (has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable)
    message: "spec.unschedulable: {{ $who }} never cordons or uncordons a node"
  - expression: >-
      (has(object.spec.providerID) ? object.spec.providerID : '') == (has(oldObject.spec.providerID) ? oldObject.spec.providerID : '') &&
      (has(object.spec.podCIDR) ? object.spec.podCIDR : '') == (has(oldObject.spec.podCIDR) ? oldObject.spec.podCIDR : '') &&
      (has(object.spec.podCIDRs) ? object.spec.podCIDRs : []) == (has(oldObject.spec.podCIDRs) ? oldObject.spec.podCIDRs : [])
    message: "spec.providerID, spec.podCIDR, spec.podCIDRs: {{ $who }} never changes them"
  - expression: >-
      variables.oldLabels.all(k, k == {{ $label }} || (k in variables.newLabels && variables.newLabels[k] == variables.oldLabels[k])) &&
      variables.newLabels.all(k, k == {{ $label }} || k in variables.oldLabels)
    message: "metadata.labels: {{ $who }} may change only its verified label {{ $nm.verifiedLabel.key }}"
  - expression: >-
      !({{ $label }} in variables.oldLabels) || {{ $label }} in variables.newLabels
    message: "metadata.labels: {{ $who }} never removes the verified label {{ $nm.verifiedLabel.key }} (removing it asks for a new verification: a user's gesture)"
  - expression: variables.newAnnotations == variables.oldAnnotations
    message: "metadata.annotations: {{ $who }} never changes them (its progress is in the node's NodeVerification)"
  - expression: >-
      (has(object.metadata.finalizers) ? object.metadata.finalizers : []) == (has(oldObject.metadata.finalizers) ? oldObject.metadata.finalizers : []) &&
      (has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) == (has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : [])
    message: "metadata.finalizers, metadata.ownerReferences: {{ $who }} never changes them"
  - expression: variables.newConditions.filter(c, c.type != {{ $condition }}) == variables.oldConditions.filter(c, c.type != {{ $condition }})
    message: "status.conditions: {{ $who }} may change only its own condition {{ $nm.condition.type }}"
  - expression: >-
      has(object.status) == has(oldObject.status) && (!has(object.status) ||
      {{- range $i, $field := list "capacity" "allocatable" "phase" "addresses" "daemonEndpoints" "nodeInfo" "images" "volumesInUse" "volumesAttached" "config" }}
      {{ if $i }}&& {{ end }}(has(object.status.{{ $field }}) == has(oldObject.status.{{ $field }}) && (!has(object.status.{{ $field }}) || object.status.{{ $field }} == oldObject.status.{{ $field }}))
      {{- end }})
    message: "status: {{ $who }} changes only its condition, never capacity, allocatable, addresses or any other status field"
{{- end }}

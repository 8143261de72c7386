// Placeholder until the CLI is assembled: prints the version.
import { versionString } from '@kube-node-ready/core';
console.log(versionString());

"""Kernel isolation layers that need no root: user, mount, network and PID namespaces,
Landlock and seccomp-bpf. The guard's workers and the native compiler both run under them.

This package sits below guard and native (it imports neither) and never imports torch.
"""

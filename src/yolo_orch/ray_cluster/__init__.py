"""The Ray executor: jobs run on the GPUs of a Ray cluster's nodes, admitted by our dispatcher.

Imported only with `executor = "ray"` (it needs the `ray` extra). The store stays the truth and
the dispatcher keeps admission; Ray only runs what it is handed, on the node it is told. Importing
the package changes nothing in the process: `wiring.connect` prepares Ray's environment when the
server starts the plug-in.
"""

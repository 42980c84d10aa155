"""``okapi fuzz``: the course fuzzer against a real cluster, then checked.

The course service's fuzz test (random PUT, SWAP, GET, SCAN and DELETE from several clients, every
answer checked against the history) run through real ``okapi client`` processes, so the whole path
a user's script takes is under test, and judged by the same checkers as the simulator
(``okapikv.check``). This package holds process control and history recording, which is why it is
apart from ``okapikv.check`` (pure functions of a history):

- ``plan``: the operation mix, keys and values, from the seed;
- ``clients``: the ``okapi client`` processes and their at-most-once writes;
- ``replies``: their answers, parsed into history fields (write timestamps included);
- ``recorder``: the thread-safe history, on the monotonic clock;
- ``cluster``: the local cluster it starts, or the running one it connects to;
- ``kill``: ``--kill-partitions``, SIGKILL and restart in the middle of a run;
- ``run``: one run, from the clients' start to the checked history;
- ``command``: the ``okapi fuzz`` command, its summary and exit status.

``parsers`` is the other kind of fuzzing: a target per parser of untrusted input (RESP, native
frames, the stdin protocol, the cluster config, load files, history files), each run under the
bounds a parser owes, by hypothesis in the suite and by atheris for the longer runs.
"""

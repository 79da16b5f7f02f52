"""The stream process: a person's tokens written by a process that does nothing else.

Under load a serving process is always busy with turns, and a token that reaches it waits for
that process's turn at a core (docs/benchmarks.md, sections 3q, 3x, 3y). So `pressloop serve`
starts one more process beside each serving process (`PRESSLOOP_STREAM_PROCESS`, on unless set
to false, for an OpenAI-compatible provider), the stream process, which carries only a token's
work:

- a serving process that streams a run it runs (`POST .../runs` with `mode: stream`) writes the
  response's headers, then hands the connection to the stream process (`api/handover.py`:
  the socket goes over a unix socket with SCM_RIGHTS) and from then on sends it the run's
  committed events instead of writing them;
- that run's streamed model calls go through the stream process (`relay.py`): it passes every
  byte between the serving process's model client and the provider, and cuts the answer's text
  into the parts the engine will emit, with the provider adapter's own code;
- the stream process writes the person's frames (`stream.py`): the committed events in order,
  and each part as soon as it is read, at the position `N.k` the serving process's own stream
  would give it (`runtime/bus.py`), so a reconnect with Last-Event-ID resumes exactly, anywhere.

Every event a client must neither miss nor see twice still goes out only after its commit: the
stream process gets the committed events from the serving process. A stream process that is
gone costs live frames, never a run: the serving process calls the model directly and streams
as before.
"""

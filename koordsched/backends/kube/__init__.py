"""The cluster backend: list/watch into the scheduler, bind and report through the API server.

``app.run_scheduler``/``app.run_command`` run it; ``flags.add_run_arguments`` declares its flags.
"""

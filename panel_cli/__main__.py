try:
    from panel_cli.cli.entry import main
except KeyboardInterrupt:  # Ctrl-C while `python -m panel_cli` imports its entry point
    import sys

    sys.stderr.write("panel: interrupted by SIGINT.\n")
    sys.exit(130)

main()

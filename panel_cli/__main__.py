from panel_cli.cli.entry import main

main()

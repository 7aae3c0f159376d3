from panel_cli.cli.app import main

main()

from cer_cli.cli import main

main()

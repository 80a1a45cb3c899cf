from playpen.cli import main

main()

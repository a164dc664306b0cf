from sweeper.cli import main

main()

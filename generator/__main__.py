from generator.console import main

main()

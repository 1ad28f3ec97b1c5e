from megane_jupyter_bridge import main

main()

import sys

from pressloop.streamer.process import main

sys.exit(main())

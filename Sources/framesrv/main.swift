print("framesrv")

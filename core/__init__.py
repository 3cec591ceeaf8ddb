"""The bottom layer every other package stands on: playing cards and the root of cardd's errors.

It imports nothing of the project, so the game rules can use cards without touching the
protocol or the drivers.
"""

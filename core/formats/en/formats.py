# Times to the second, with their zone, wherever Django formats a datetime for English readers
# (the admin above all: its default, "N j, Y, P", drops the seconds and hides the zone).
DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"

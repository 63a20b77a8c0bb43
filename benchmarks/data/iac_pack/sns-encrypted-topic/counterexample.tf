resource "aws_sns_topic" "alerts" {
  name         = "alerts"
  display_name = "Alerts"
}

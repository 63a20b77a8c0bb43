resource "aws_sns_topic" "alerts" {
  name              = "alerts"
  display_name      = "Alerts"
  kms_master_key_id = "alias/aws/sns"
}

provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "alerts" {
  name     = "rg-alerts"
  location = "westeurope"
}

resource "azurerm_monitor_action_group" "oncall" {
  name                = "ag-oncall"
  resource_group_name = azurerm_resource_group.alerts.name
  short_name          = "oncall"

  email_receiver {
    name          = "sre"
    email_address = "sre@acme.example"
  }
}

resource "azurerm_monitor_metric_alert" "cpu" {
  name                = "cpu-high"
  resource_group_name = azurerm_resource_group.alerts.name
  scopes              = ["/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-vm/providers/Microsoft.Compute/virtualMachines/vm-app"]
  severity            = 2

  criteria {
    metric_namespace = "Microsoft.Compute/virtualMachines"
    metric_name      = "Percentage CPU"
    aggregation      = "Average"
    operator         = "GreaterThan"
    threshold        = 80
  }

  action {
    action_group_id = azurerm_monitor_action_group.oncall.id
  }
}

provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "mon" {
  name     = "rg-monitoring"
  location = "westeurope"
}

resource "azurerm_log_analytics_workspace" "main" {
  name                = "law-main"
  location            = azurerm_resource_group.mon.location
  resource_group_name = azurerm_resource_group.mon.name
  sku                 = "PerGB2018"
  retention_in_days   = 30

  identity {
    type = "SystemAssigned"
  }
}

resource "azurerm_application_insights" "app" {
  name                = "appi-main"
  location            = azurerm_resource_group.mon.location
  resource_group_name = azurerm_resource_group.mon.name
  workspace_id        = azurerm_log_analytics_workspace.main.id
  application_type    = "web"
}
